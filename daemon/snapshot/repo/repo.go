package repo

// Files of the store besides git's own.
const (
	OversizedFile = "oversized.exclude" // core.excludesFile: the files skipped for their size
)
