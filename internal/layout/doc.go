// Package layout holds the tests that keep the tree what the README says
// it is: imports point down the floors, the Layout section names every
// package, and the README's tables match the code they describe.
package layout
