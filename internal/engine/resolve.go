package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// plan is where the job reads and writes.
type plan struct {
	walkRoot string // what the sharder walks
	src      source.Source
	dstRoot  string // the receiver's root
	rename   string // for a single-file SRC, its name under dstRoot
	srcReal  string // SRC, resolved: what it names, with no symlink on the way
}

func (j *job) resolve(ctx context.Context) (plan, Outcome) {
	var p plan
	if j.hub != nil {
		return j.resolveHub()
	}
	t, remote, err := sshx.ParseTarget(j.dst)
	if strings.HasPrefix(j.dst, serveScheme) {
		t, remote, err = j.parseServe(j.dst)
	}
	if err != nil {
		return p, j.fail(UsageError, err)
	}
	if remote {
		j.remote = &t
	}
	src, fi, err := paths.ResolveSrc(j.src)
	if err != nil {
		return p, j.fail(Failed, fmt.Errorf("source %s: %w", j.src, paths.Unwrap(err)))
	}
	p.srcReal = src
	dst := ""
	if j.remote == nil {
		if dst, err = paths.ResolveDest(j.dst); err != nil {
			return p, j.fail(Failed, fmt.Errorf("destination %s: %w", j.dst, paths.Unwrap(err)))
		}
	}
	if fi.IsDir() {
		d, err := os.Open(src)
		if err != nil {
			return p, j.fail(Failed, fmt.Errorf("source %s: %w", j.src, paths.Unwrap(err)))
		}
		d.Close()
		p.walkRoot, p.src.Root = src, src
		if j.remote != nil {
			p.dstRoot = j.remote.Path
			return p, Done
		}
		p.dstRoot = dst
		if dfi, err := os.Stat(dst); err == nil && !dfi.IsDir() {
			return p, j.fail(UsageError, fmt.Errorf("destination %s is an existing file, but the source %s is a directory", j.dst, j.src))
		}
		return p, j.refuseOverlap(src, dst, j.dst)
	}
	if !fi.Mode().IsRegular() {
		return p, j.fail(Failed, fmt.Errorf("source %s is not a regular file or directory", j.src))
	}
	// A single file: into DEST if DEST is a directory, else as DEST. In a
	// directory it takes the name it was given (a symlink's, if SRC is
	// one), as cp does.
	name := filepath.Base(j.src)
	p.walkRoot = src
	p.src = source.Source{Root: filepath.Dir(src), File: src}
	if j.remote != nil {
		p.rename = name
		j.remoteDest(ctx, *j.remote, &p)
		return p, Done
	}
	target := filepath.Join(j.dst, name)
	if dfi, err := os.Stat(dst); err == nil && dfi.IsDir() {
		p.dstRoot = dst
		p.rename = name
	} else {
		p.dstRoot = filepath.Dir(dst)
		p.rename = filepath.Base(dst)
		target = j.dst
	}
	return p, j.refuseOverlap(src, filepath.Join(p.dstRoot, p.rename), target)
}

// refuseOverlap refuses (UsageError) a local job whose SRC (src, resolved)
// and DEST (dst, resolved; named dstName) Overlap.
func (j *job) refuseOverlap(src, dst, dstName string) Outcome {
	refused, err := paths.CheckOverlap(j.src, src, dstName, dst)
	if err == nil {
		return Done
	}
	if refused {
		return j.fail(UsageError, err)
	}
	return j.fail(Failed, err)
}

func (j *job) receiveOptions() wire.ReceiveOptions {
	// Owner: keep numeric uid/gid wherever the receiver runs as root.
	o := wire.ReceiveOptions{Fsync: j.flags.Fsync || j.flags.RemoveSourceFiles, Owner: !j.flags.NoOwner, KeepSetid: j.flags.KeepSetid, Check: wire.CheckQuick,
		IOConcurrency: int(j.flags.IOConcurrency), NoSums: j.flags.NoVerifyTransfer, Delete: j.flags.Delete, SyncInPlace: j.flags.RemoveSourceFiles,
		Itemize: j.flags.Itemize || j.log != nil || j.flags.Stats, DryRun: j.flags.DryRun}
	if mode, err := j.flags.checkMode(); err == nil { // checked with the other flags
		o.Check = mode
	}
	j.flags.Faithful.receive(&o)
	j.flags.Backup.receive(&o)
	j.flags.Select.receive(&o)
	j.flags.Owners.receive(&o)
	_, o.FakeSuper = j.fakeSuper()
	if !j.flags.WholeFile {
		o.DeltaMin = max(int64(j.flags.DeltaMin), 1)
		o.InPlace = j.flags.InPlace
	}
	return o
}
