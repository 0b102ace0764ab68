// Command continuityd is the continuity daemon for AI agents and its client.
// main only wires the process to the command table; see cli.go.
package main

import "os"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
