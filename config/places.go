package config

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The [places] defaults: sessions adopt their project, under the user's
// home, 32 places watched at once, a place unwatched after 8 hours
// without a session.
const (
	DefaultMaxWatched = 32
	DefaultIdleAfter  = 8 * time.Hour
	maxMaxWatched     = 10_000
)

// DefaultRoots is [places] roots' default: the user's home.
func DefaultRoots() []string { return []string{"~"} }

func (c *checker) places(r rawPlaces) Places {
	p := Places{Adopt: boolOr(r.Adopt, true), Roots: DefaultRoots(), MaxWatched: DefaultMaxWatched}
	p.IdleAfter = c.timeoutWithin("places.idle_after", r.IdleAfter, DefaultIdleAfter, time.Minute, 365*24*time.Hour, "must be from 1m to 8760h")
	if n := r.MaxWatched; n != nil {
		if *n < 1 || *n > maxMaxWatched {
			c.failGot("places.max_watched", "must be from 1 to 10000", *n)
		} else {
			p.MaxWatched = int(*n)
		}
	}
	if r.Roots != nil {
		p.Roots = []string{}
		for i, root := range r.Roots {
			key := indexKey("places.roots", i)
			switch {
			case root == "~" || strings.HasPrefix(root, "~/"):
				// The home of the user whose project it is: kept as
				// written, expanded for each user (Places.RootsFor).
				p.Roots = append(p.Roots, strings.TrimSuffix(filepath.Clean(root), "/"))
			case strings.HasPrefix(root, "~"):
				c.failGot(key, "only ~ and ~/ (the home of the user whose project it is) are expanded, not ~user", root)
			case !filepath.IsAbs(root):
				c.failGot(key, "must be an absolute path, ~ or start with ~/", root)
			default:
				p.Roots = append(p.Roots, filepath.Clean(root))
			}
		}
	}
	return p
}

// SystemFile is the config file a root daemon reads when none is given.
const SystemFile = "/etc/continuityd/continuityd.toml"

// UserFile is the config file `run` reads when none is given and it
// exists: $XDG_CONFIG_HOME/continuityd/continuityd.toml (default
// ~/.config/continuityd/continuityd.toml) for a user, SystemFile for
// root. "" when neither $XDG_CONFIG_HOME nor $HOME is absolute.
func UserFile() string {
	return userFile(os.Getenv, os.Geteuid())
}

// UserFileFor is UserFile for the environment getenv and the user euid
// (a client command's, whose environment tests set).
func UserFileFor(getenv func(string) string, euid int) string {
	return userFile(getenv, euid)
}

func userFile(getenv func(string) string, euid int) string {
	if euid == 0 {
		return SystemFile
	}
	dir := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "continuityd", "continuityd.toml")
}
