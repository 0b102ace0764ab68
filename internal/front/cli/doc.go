// Package cli is continuityd's command line: the command table, the usage
// text, the flags every client command shares, and the commands.
//
// The mains in cmd/ only wire a process to Main.
package cli
