package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// floodEnv, set in the environment of this test binary, makes it a flood
// of idle connections instead of running tests (TestMain): it connects to
// the socket the variable names floodCountEnv times, says how many
// connects succeeded on stdout, and holds every connection, reading and
// sending nothing, until its stdin closes.
const (
	floodEnv      = "CONTINUITYD_TEST_FLOOD"
	floodCountEnv = "CONTINUITYD_TEST_FLOOD_COUNT"
)

func floodMain() {
	n, _ := strconv.Atoi(os.Getenv(floodCountEnv))
	var held []net.Conn
	for range n {
		if c, err := net.Dial("unix", os.Getenv(floodEnv)); err == nil {
			held = append(held, c)
		}
	}
	fmt.Printf("opened %d\n", len(held))
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// askEnv, set in the environment of this test binary, makes it an HTTP
// client of the socket the variable names instead of running tests
// (TestMain), for a test that asks as another user: it reads one request
// (HTTP/1.1, as written by http.Request.Write) on stdin, sends it, and
// writes the answer's status line, headers and body on stdout.
const askEnv = "CONTINUITYD_TEST_ASK"

func askMain() {
	req, err := http.ReadRequest(bufio.NewReader(os.Stdin))
	if err == nil {
		var c net.Conn
		if c, err = net.DialTimeout("unix", os.Getenv(askEnv), 30*time.Second); err == nil {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if err = req.Write(c); err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(c), req); err == nil {
					err = resp.Write(os.Stdout)
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
