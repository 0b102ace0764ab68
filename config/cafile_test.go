package config

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// ca_file pins the CAs of a qday or delx upstream too, strictly: a missing
// file or one with no certificate is refused naming the key; the local
// upstream takes none.
func TestCAFileForHTTPUpstreams(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	dir := t.TempDir()
	good, junk := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runErrCases(t, []errCase{
		{"missing", src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`, `ca_file = "`+filepath.Join(dir, "none.pem")+`"`), "upstream.qday.ca_file", 4, 1, "none.pem"},
		{"no certificate", src(`[upstream.delx]`, `url = "https://d.example"`, `ca_file = "`+junk+`"`), "upstream.delx.ca_file", 3, 1, "holds no PEM certificate"},
		{"relative", src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`, `ca_file = "ca.pem"`), "upstream.qday.ca_file", 4, 1, "must be an absolute path"},
		{"local", src(`[upstream.local]`, `ca_file = "`+good+`"`), "upstream.local.ca_file", 2, 1, "takes no ca_file"},
	})
	c := mustDecode(t, src(`[upstream.qday]`, `url = "https://q.example"`, `token_env = "T"`, `ca_file = "`+good+`"`,
		`[upstream.delx]`, `url = "https://d.example"`, `ca_file = "`+good+`"`))
	for _, name := range []string{"qday", "delx"} {
		u := c.Upstreams[name]
		if pool, err := u.CAPool(); u.CAFile != good || pool == nil || err != nil {
			t.Errorf("%s: ca_file %q, pool %v, %v", name, u.CAFile, pool, err)
		}
	}
}
