package packaging

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The parts of nfpm.yaml and .goreleaser.yaml that must agree.
type nfpmContent struct {
	Src      string `yaml:"src"`
	Dst      string `yaml:"dst"`
	Type     string `yaml:"type"`
	Packager string `yaml:"packager"`
	Expand   bool   `yaml:"expand"`
	FileInfo struct {
		Mode int `yaml:"mode"`
	} `yaml:"file_info"`
}

type nfpmScripts struct {
	PostInstall string `yaml:"postinstall"`
	PreRemove   string `yaml:"preremove"`
	PostRemove  string `yaml:"postremove"`
}

type nfpmPackage struct {
	Maintainer  string                                   `yaml:"maintainer"`
	Homepage    string                                   `yaml:"homepage"`
	Vendor      string                                   `yaml:"vendor"`
	Description string                                   `yaml:"description"`
	Section     string                                   `yaml:"section"`
	Priority    string                                   `yaml:"priority"`
	Release     string                                   `yaml:"release"`
	Changelog   string                                   `yaml:"changelog"`
	Contents    []nfpmContent                            `yaml:"contents"`
	Scripts     nfpmScripts                              `yaml:"scripts"`
	Overrides   map[string]struct{ Scripts nfpmScripts } `yaml:"overrides"`
}

type goreleaser struct {
	Version int `yaml:"version"`
	Before  struct {
		Hooks []string `yaml:"hooks"`
	} `yaml:"before"`
	Builds []struct {
		ID      string   `yaml:"id"`
		Binary  string   `yaml:"binary"`
		Main    string   `yaml:"main"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Archives []struct {
		IDs   []string `yaml:"ids"`
		Files []string `yaml:"files"`
	} `yaml:"archives"`
	Nfpms []struct {
		nfpmPackage `yaml:",inline"`
		IDs         []string `yaml:"ids"`
		Formats     []string `yaml:"formats"`
		Bindir      string   `yaml:"bindir"`
	} `yaml:"nfpms"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestGoreleaserMatchesNfpm keeps the packages of a release (.goreleaser.yaml)
// and of packaging/build-deb.sh (nfpm.yaml) the same, and the release's
// builds what the issue asks for.
func TestGoreleaserMatchesNfpm(t *testing.T) {
	var n nfpmPackage
	readYAML(t, "nfpm.yaml", &n)
	var g goreleaser
	readYAML(t, "../.goreleaser.yaml", &g)

	if g.Version != 2 || len(g.Builds) != 2 || len(g.Nfpms) != 1 || len(g.Archives) != 1 {
		t.Fatalf("want a v2 config with two builds (the front and the daemon), one archive and one nfpm; got %+v", g)
	}
	// Both binaries, built alike, in the archive and the packages: the
	// front hands the daemon's commands to the one beside it.
	ids := []string{"continuityd", "continuityd-daemon"}
	for i, b := range g.Builds {
		if b.ID != ids[i] || b.Binary != ids[i] || b.Main != "./cmd/"+ids[i] {
			t.Errorf("build %d: id %q binary %q main %q, want %s from ./cmd/%[4]s", i, b.ID, b.Binary, b.Main, ids[i])
		}
		if !slices.Equal(b.Goos, []string{"linux", "darwin", "windows"}) || !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
			t.Errorf("%s builds for %v × %v", b.ID, b.Goos, b.Goarch)
		}
		if !slices.Contains(b.Env, "CGO_ENABLED=0") || len(b.Ldflags) != 1 || !strings.Contains(b.Ldflags[0], "-X main.version=") {
			t.Errorf("%s: build env %q, ldflags %q: want CGO_ENABLED=0 and -X main.version", b.ID, b.Env, b.Ldflags)
		}
	}
	if !slices.Equal(g.Archives[0].IDs, ids) || !slices.Equal(g.Nfpms[0].IDs, ids) {
		t.Errorf("the archive packs %q and the packages %q; want both binaries, %q", g.Archives[0].IDs, g.Nfpms[0].IDs, ids)
	}
	if !slices.Contains(g.Before.Hooks, "go run ./packaging/gen packaging/generated") {
		t.Errorf("the before hooks %q do not generate packaging/generated", g.Before.Hooks)
	}

	p := g.Nfpms[0]
	if !slices.Equal(p.Formats, []string{"deb", "rpm"}) || p.Bindir != "/usr/bin" {
		t.Errorf("nfpms formats %q bindir %q", p.Formats, p.Bindir)
	}
	// nfpm.yaml also packs the binaries, which goreleaser adds itself.
	var rest []nfpmContent
	packed := map[string]bool{}
	for _, c := range n.Contents {
		if c.Dst == PackagedBinary || c.Dst == PackagedDaemonBinary {
			if want := "./dist/linux_${ARCH}/" + filepath.Base(c.Dst); !c.Expand || c.Src != want || c.FileInfo.Mode != 0o755 {
				t.Errorf("nfpm.yaml packs %s from %q (expand %v, mode %o), want %s", c.Dst, c.Src, c.Expand, c.FileInfo.Mode, want)
			}
			packed[c.Dst] = true
			continue
		}
		rest = append(rest, c)
	}
	if !packed[PackagedBinary] || !packed[PackagedDaemonBinary] {
		t.Errorf("nfpm.yaml packs %v; want %s and %s", packed, PackagedBinary, PackagedDaemonBinary)
	}
	if len(rest) < 5 || n.Description == "" {
		t.Fatalf("nfpm.yaml was not read: %+v", n)
	}
	if !reflect.DeepEqual(p.nfpmPackage, nfpmPackage{
		Maintainer: n.Maintainer, Homepage: n.Homepage, Vendor: n.Vendor, Description: n.Description,
		Section: n.Section, Priority: n.Priority, Release: n.Release, Changelog: n.Changelog,
		Contents: rest, Scripts: n.Scripts, Overrides: n.Overrides,
	}) {
		t.Errorf(".goreleaser.yaml's nfpm differs from packaging/nfpm.yaml:\n%+v\n%+v", p.nfpmPackage, n)
	}

	// Every source that is not built exists, and the archive's files too.
	for _, c := range n.Contents {
		if strings.HasPrefix(c.Src, "./dist/") || strings.HasPrefix(c.Src, "./packaging/generated/") {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", c.Src)); err != nil {
			t.Errorf("nfpm.yaml: %v", err)
		}
	}
	for _, s := range []string{n.Scripts.PostInstall, n.Scripts.PostRemove, n.Overrides["deb"].Scripts.PreRemove, n.Overrides["rpm"].Scripts.PreRemove, n.Changelog} {
		if _, err := os.Stat(filepath.Join("..", s)); s == "" || err != nil {
			t.Errorf("nfpm.yaml: script or changelog %q: %v", s, err)
		}
	}
	shipped := map[string]bool{}
	for _, f := range g.Archives[0].Files {
		m, err := filepath.Glob(filepath.Join("..", f))
		if err != nil || len(m) == 0 {
			t.Errorf(".goreleaser.yaml archives: %q matches no file (%v)", f, err)
		}
		for _, p := range m {
			shipped[filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator)))] = true
		}
	}
	// Someone who unpacks the archive reads the README first: every
	// document it links to is in the archive beside it.
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range relativeLink.FindAllStringSubmatch(string(readme), -1) {
		if target := m[1]; !shipped[target] {
			t.Errorf("README.md links to %s, which the archive does not ship: add it to .goreleaser.yaml's archives.files", target)
		}
	}
}

// relativeLink finds a Markdown link's target that is a file beside the
// README, without its #fragment.
var relativeLink = regexp.MustCompile(`\]\(([^):#]+)(?:#[^)]*)?\)`)
