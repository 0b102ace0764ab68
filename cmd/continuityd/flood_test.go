package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
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
