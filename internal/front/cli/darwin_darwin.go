package cli

// darwin says the platform opens URLs with open(1), with no display
// variable to check.
const darwin = true
