package config

import (
	"crypto/x509"
	"fmt"

	"github.com/continuityd/continuityd/internal/safefile"
)

// maxCAFile bounds how much of a ca_file is read: a bundle of a few
// hundred certificates fits.
const maxCAFile = 1 << 20

// CAPool reads an upstream's ca_file: the PEM certificates of the only CAs
// its TLS is trusted with (the system's when ca_file is unset: nil). A
// file that cannot be read or holds no certificate is an error naming it.
func (u Upstream) CAPool() (*x509.CertPool, error) {
	if u.CAFile == "" {
		return nil, nil
	}
	pem, err := safefile.ReadFileFollow(u.CAFile, maxCAFile)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s holds no PEM certificate", u.CAFile)
	}
	return pool, nil
}
