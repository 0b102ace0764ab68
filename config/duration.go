package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in TOML as a string such as "2s" or
// "10m" (Go's time.ParseDuration syntax). A negative duration is an error:
// every duration in the configuration is a wait or a timeout.
type Duration struct{ time.Duration }

// UnmarshalText parses a duration string such as "30s".
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := parseDuration(string(text))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in the form UnmarshalText reads.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// parseDuration is UnmarshalText's rule, shared with Decode, which reads
// durations as plain strings so that their errors carry the key's position.
// time's own error is not wrapped: it would name the value a second time.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as \"30s\" or \"10m\" (got %q)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative (got %q)", s)
	}
	return v, nil
}
