// Package buildinfo says which bulkmove this is: its version and the
// source revision it was built from, read from the build information the
// go command writes into every binary (runtime/debug.ReadBuildInfo).
//
//   - `go install github.com/bulkmove/bulkmove/cmd/bulkmove@v1.2.3` (or
//     @latest): the module's version, v1.2.3 or a pseudo-version, whose
//     last part is the revision.
//   - a build in a checkout (go build, make): the vcs.revision and
//     vcs.modified the go command stamps (-buildvcs), and the version
//     Dev unless the checkout is exactly at a release tag. Every such
//     build shares Dev: the agent cache on a remote host is keyed by the
//     version, and tells two builds of one version apart by their hash.
//   - a packager's build: -ldflags "-X
//     github.com/bulkmove/bulkmove/internal/buildinfo.version=1.2.3 -X
//     github.com/bulkmove/bulkmove/internal/buildinfo.revision=abc123"
//     wins over both.
package buildinfo

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set by the linker's -X for a packager's build; empty otherwise.
var (
	version  string
	revision string
)

// Dev is the version of a build that is not of a release.
const Dev = "0.1.0-dev"

// Unknown is the revision of a build that carries none.
const Unknown = "unknown"

// Info is what Get reports.
type Info struct {
	Version   string // v1.2.3, a pseudo-version, or Dev
	Revision  string // 12 hex digits, "-dirty" if the checkout had changes; or Unknown
	GoVersion string // the toolchain's, runtime.Version()
	Platform  string // GOOS/GOARCH
}

// Get returns this binary's Info.
var Get = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return from(bi, version, revision)
})

// pseudo matches a pseudo-version (v0.0.0-20261202134957-0123456789ab,
// v1.2.4-0.2026..., v1.3.0-rc.1.0.2026...), capturing its revision.
var pseudo = regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:.*\.)?\d{14}-([0-9a-f]{12})(?:\+.*)?$`)

// from is Get's reading of bi (nil: none) and of the linker's values.
func from(bi *debug.BuildInfo, ldVersion, ldRevision string) Info {
	in := Info{Version: Dev, Revision: Unknown, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var mod string
	var vcsRev string
	var dirty, checkout bool
	if bi != nil {
		mod = bi.Main.Version
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRev, checkout = s.Value, true
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if mod == "(devel)" {
		mod = ""
	}
	m := pseudo.FindStringSubmatch(mod)
	switch {
	case checkout:
		// A checkout's module version is a pseudo-version of each
		// commit, or the tag's with +dirty: a release only when clean.
		in.Revision = short(vcsRev)
		if dirty {
			in.Revision += "-dirty"
		}
		if mod != "" && m == nil && !strings.Contains(mod, "+") {
			in.Version = mod
		}
	case m != nil:
		in.Version, in.Revision = mod, m[1]
	case mod != "":
		in.Version = mod
	}
	if ldVersion != "" {
		in.Version = ldVersion
	}
	if ldRevision != "" {
		in.Revision = ldRevision
	}
	return in
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
