// Package repo is a snapshot store on disk: a bare git repository private
// to the daemon, and the git driver that runs git on it isolated from
// every configuration but the store's own.
package repo
