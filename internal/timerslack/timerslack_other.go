//go:build !linux

package timerslack

import (
	"errors"
	"time"
)

func current() (time.Duration, error) {
	return 0, errors.New("timer slack: only Linux has one")
}

func ensure(time.Duration) error { return nil }
