//go:build !linux && !darwin

package safesocket

func peerCred(int) (Cred, error) { return Cred{}, ErrNoPeerCred }
