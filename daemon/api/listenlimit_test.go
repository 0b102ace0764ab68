package api

import (
	"net"
	"sync/atomic"
	"testing"
)

// TestLimitListenerHoldsAcceptAtTheCap: with max connections open, the
// next Accept returns only once one of them is closed.
func TestLimitListenerHoldsAcceptAtTheCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitListener(inner, 2)
	defer l.Close()
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	var closed atomic.Bool
	third := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			if !closed.Load() {
				t.Error("a third connection was accepted while two were open")
			}
			c.Close()
		}
		third <- err
	}()
	closed.Store(true)
	first.Close()
	first.Close() // a second Close gives no second slot back
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	// Closing the listener ends an Accept waiting for a slot.
	held, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	waiting := make(chan error, 1)
	go func() { _, err := l.Accept(); waiting <- err }()
	l.Close()
	if err := <-waiting; err == nil {
		t.Fatal("Accept after Close succeeded")
	}
}
