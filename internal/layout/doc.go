// Package layout holds the tests that keep the tree what its documents say
// it is: imports point down the floors, the daemon's top package holds
// only wiring, the Layout in docs/ARCHITECTURE.md names every package, the
// documents' tables match the code they describe, and their links lead
// somewhere.
package layout
