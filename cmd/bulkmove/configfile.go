package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// The config file (--config FILE, default ~/.config/bulkmove/config)
// holds defaults for every job, and named profiles for recurring ones:
//
//	# defaults: any flag, without its dashes
//	jobs = 8
//	bwlimit = 50M
//
//	[nightly]
//	src = /data
//	dst = box2:/data
//	delete = true
//	exclude = *.tmp
//	exclude = cache/
//
// `bulkmove --profile nightly` runs that job; flags on the command line
// override the file's (repeatable flags add up: the file's first), and
// SRC DEST on the command line replace the profile's src and dst.

// configDefaults is the move's command.defaults: the flags the config
// file sets, and the profile's SRC and DEST. A key that names none of
// fs's flags is an error naming the file and line.
func configDefaults(fs *pflag.FlagSet, line []string) (flags, operands []string, err error) {
	known := func(key string) string {
		if f := fs.Lookup(key); f != nil {
			return f.Name
		}
		if len(key) == 1 { // j = 8: the flag -j is --jobs
			if f := fs.ShorthandLookup(key); f != nil {
				return f.Name
			}
		}
		return ""
	}
	flags, src, dst, err := configArgs(line, known)
	if err != nil || src == "" || dst == "" {
		return flags, nil, err
	}
	return flags, []string{src, dst}, nil
}

// configArgs reads the config file for the command line args and returns
// the flags it sets (defaults, then the profile's) and the profile's SRC
// and DEST, if any. known gives the long name of the flag a key names,
// or "" if none.
func configArgs(args []string, known func(key string) string) (flags []string, src, dst string, err error) {
	path, explicit := flagValue(args, "config")
	if path == "" {
		home, herr := os.UserHomeDir()
		if herr != nil {
			return nil, "", "", nil
		}
		path = filepath.Join(home, ".config", "bulkmove", "config")
	}
	profile, _ := flagValue(args, "profile")
	f, err := os.Open(path)
	if err != nil {
		if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) && !explicit && profile == "" {
			return nil, "", "", nil // no config file (none we may read): fine
		}
		return nil, "", "", fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	section, found := "", false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			found = found || section == profile
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, "", "", fmt.Errorf("config %s:%d: want KEY = VALUE, got %q", path, n, line)
		}
		if section != "" && section != profile {
			continue
		}
		switch k {
		case "src":
			src = v
		case "dst":
			dst = v
		case "config", "profile":
			return nil, "", "", fmt.Errorf("config %s:%d: %s cannot be set in the file", path, n, k)
		default:
			name := known(k)
			if name == "" {
				return nil, "", "", fmt.Errorf("config %s:%d: unknown key %q: no flag --%s", path, n, k, k)
			}
			flags = append(flags, "--"+name+"="+v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", "", fmt.Errorf("config %s: %w", path, err)
	}
	if profile != "" && !found {
		return nil, "", "", fmt.Errorf("config %s: no profile [%s]", path, profile)
	}
	return flags, src, dst, nil
}

// flagValue finds --name V or --name=V among args (up to a "--"); set
// says whether it was there.
func flagValue(args []string, name string) (v string, set bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		a, long := strings.CutPrefix(a, "--")
		if !long {
			continue
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			return rest, true
		}
	}
	return "", false
}

// envPrefix starts the environment variables that set a flag of a
// command the user runs (move, verify, plan), as rclone's RCLONE_<FLAG>:
// BULKMOVE_BWLIMIT=50M is --bwlimit=50M. They come first, so that the
// config file and then the command line override them. The internal
// commands (agent, send-hub, join) and serve never read them: a
// receiver's behaviour is set by its sender's wire options or its own
// command line, not by what the environment of a login carries.
const envPrefix = "BULKMOVE_"

// tunePrefix starts the tuning and debugging variables
// (BULKMOVE_TUNE_KNOWN_MEM, ...; docs/configuration.md): never a flag.
const tunePrefix = envPrefix + "TUNE_"

// envSkipped are the flags no variable sets: they would turn a run into
// another command, or they are read before the flags (the config file's).
var envSkipped = map[string]bool{"help": true, "version": true, "config": true, "profile": true}

// envDefaults sets fs's flags from environ's BULKMOVE_<FLAG> variables
// (the flag's long name in capitals, - as _). A variable that names no
// flag is left alone, as are an empty one (taken as unset) and the
// tuning variables (tunePrefix).
func envDefaults(fs *pflag.FlagSet, environ []string) error {
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(k, envPrefix)
		if !ok || rest == "" || v == "" || strings.HasPrefix(k, tunePrefix) {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		f := fs.Lookup(name)
		if f == nil || envSkipped[name] || len(f.Annotations[annImplied]) > 0 {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("environment %s=%q: invalid value for --%s: %v", k, v, name, err)
		}
	}
	return nil
}
