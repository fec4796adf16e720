package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/push"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

type desc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType
	name string
}

func newDesc(name, help string, kind prometheus.ValueType, labels ...string) desc {
	return desc{prometheus.NewDesc("bulkmove_"+name, help, labels, nil), kind, "bulkmove_" + name}
}

var (
	dSentBytes   = newDesc("stream_sent_bytes_total", "File data sent by each stream.", prometheus.CounterValue, "stream")
	dSentFiles   = newDesc("stream_sent_files_total", "Files sent by each stream.", prometheus.CounterValue, "stream")
	dBatches     = newDesc("stream_batches_total", "Batches acknowledged on each stream.", prometheus.CounterValue, "stream")
	dRetries     = newDesc("stream_retries_total", "Batches sent again after a failure, per stream.", prometheus.CounterValue, "stream")
	dRead        = newDesc("stream_read_seconds_total", "Time each stream spent reading source files.", prometheus.CounterValue, "stream")
	dSendBlocked = newDesc("stream_send_blocked_seconds_total", "Time each stream was blocked writing to its connection (socket full).", prometheus.CounterValue, "stream")
	dAckWait     = newDesc("stream_ack_wait_seconds_total", "Time each stream waited for the receiver's answers with its window full.", prometheus.CounterValue, "stream")
	dIdle        = newDesc("stream_idle_seconds_total", "Time each stream had nothing to send (waiting for the walk).", prometheus.CounterValue, "stream")
	dWireBytes   = newDesc("stream_wire_bytes_total", "Bytes each stream wrote to its connection: frames, tar and compressed data.", prometheus.CounterValue, "stream")
	dCompIn      = newDesc("stream_compress_in_bytes_total", "Tar bytes of the batches each stream sent compressed, before compression.", prometheus.CounterValue, "stream")
	dCompOut     = newDesc("stream_compress_out_bytes_total", "Bytes the batches each stream sent compressed took on the wire.", prometheus.CounterValue, "stream")
	dCompressing = newDesc("stream_compressing", "1 if the last batch of each stream went compressed (--compress).", prometheus.GaugeValue, "stream")
	dRecvBytes   = newDesc("receiver_written_bytes_total", "File data the receiver of each stream wrote.", prometheus.CounterValue, "stream")
	dRecvFiles   = newDesc("receiver_written_files_total", "Entries the receiver of each stream installed.", prometheus.CounterValue, "stream")
	dRecvWrite   = newDesc("receiver_write_seconds_total", "Time the receiver of each stream spent writing.", prometheus.CounterValue, "stream")
	dRecvFsync   = newDesc("receiver_fsync_seconds_total", "Time the receiver of each stream spent in fsync.", prometheus.CounterValue, "stream")
	dRecvCPU     = newDesc("receiver_cpu_seconds_total", "CPU time of each receiving process (an agent or a serve session), once per process whatever the streams it serves: the label receiver names it.", prometheus.CounterValue, "receiver")

	dPlannedBytes = newDesc("job_planned_bytes", "Bytes found by the walk so far (grows until the walk is done).", prometheus.GaugeValue)
	dPlannedFiles = newDesc("job_planned_files", "Files found by the walk so far (grows until the walk is done).", prometheus.GaugeValue)
	dWalkDone     = newDesc("job_walk_done", "1 once the walk of the source is complete.", prometheus.GaugeValue)
	dDoneBytes    = newDesc("job_done_bytes_total", "Bytes moved and acknowledged.", prometheus.CounterValue)
	dDoneFiles    = newDesc("job_done_files_total", "Files moved and acknowledged.", prometheus.CounterValue)
	dSkipped      = newDesc("job_skipped_files_total", "Files already up to date at the destination.", prometheus.CounterValue)
	dFailed       = newDesc("job_failed_files_total", "Entries that could not be moved.", prometheus.CounterValue)
	dActive       = newDesc("streams_active", "Streams connected and working.", prometheus.GaugeValue)
	dStart        = newDesc("job_start_time_seconds", "When the job started, Unix time.", prometheus.GaugeValue)
	dETA          = newDesc("job_eta_seconds", "Estimated seconds until the job is done (-1: unknown).", prometheus.GaugeValue)
	dBottleneck   = newDesc("bottleneck", "1 for the resource that limits the job now, 0 for the others.", prometheus.GaugeValue, "resource")
	dMoreStreams  = newDesc("more_streams_would_help", "1 if one more stream would likely raise throughput.", prometheus.GaugeValue)
	dBwLimit      = newDesc("bwlimit_bytes_per_second", "The job's bandwidth limit now (--bwlimit, its timetable, SIGUSR1/SIGUSR2, PUT /bwlimit); 0: none.", prometheus.GaugeValue)
)

var allDescs = []desc{dSentBytes, dSentFiles, dBatches, dRetries, dRead, dSendBlocked, dAckWait, dIdle,
	dWireBytes, dCompIn, dCompOut, dCompressing,
	dRecvBytes, dRecvFiles, dRecvWrite, dRecvFsync, dRecvCPU, dPlannedBytes, dPlannedFiles, dWalkDone,
	dDoneBytes, dDoneFiles, dSkipped, dFailed, dActive, dStart, dETA, dBottleneck, dMoreStreams, dBwLimit,
	dStreamsTarget, dAutoDecisions}

func init() { allDescs = append(allDescs, outcomeDescs...) }

// Describe implements prometheus.Collector.
func (j *Job) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d.d
	}
}

func secs(n int64) float64 { return float64(n) / 1e9 }

// Collect implements prometheus.Collector.
func (j *Job) Collect(ch chan<- prometheus.Metric) {
	m := func(d desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.d, d.kind, v, labels...)
	}
	for i, c := range j.StreamsInUse() {
		s := strconv.Itoa(i)
		m(dSentBytes, float64(c.BytesSent.Load()), s)
		m(dSentFiles, float64(c.FilesSent.Load()), s)
		m(dBatches, float64(c.Batches.Load()), s)
		m(dRetries, float64(c.Retries.Load()), s)
		m(dRead, secs(c.ReadNanos.Load()), s)
		m(dSendBlocked, secs(c.SendNanos.Load()), s)
		m(dAckWait, secs(c.WaitNanos.Load()), s)
		m(dIdle, secs(c.IdleNanos.Load()), s)
		m(dWireBytes, float64(c.WireBytes.Load()), s)
		m(dCompIn, float64(c.CompressIn.Load()), s)
		m(dCompOut, float64(c.CompressOut.Load()), s)
		m(dCompressing, b2f(c.Compressing.Load()), s)
		m(dRecvBytes, float64(c.RecvBytes.Load()), s)
		m(dRecvFiles, float64(c.RecvFiles.Load()), s)
		m(dRecvWrite, secs(c.RecvWriteNanos.Load()), s)
		m(dRecvFsync, secs(c.RecvFsyncNanos.Load()), s)
	}
	for name, cpu := range j.receiverCPU() {
		m(dRecvCPU, secs(cpu), name)
	}
	m(dPlannedBytes, float64(j.PlannedBytes.Load()))
	m(dPlannedFiles, float64(j.PlannedFiles.Load()))
	m(dWalkDone, b2f(j.WalkDone.Load()))
	m(dDoneBytes, float64(j.DoneBytes.Load()))
	m(dDoneFiles, float64(j.DoneFiles.Load()))
	m(dSkipped, float64(j.Skipped.Load()))
	m(dFailed, float64(j.Failed.Load()))
	m(dActive, float64(j.Active()))
	m(dStart, float64(j.Start.UnixNano())/1e9)
	m(dETA, j.ETA())
	v := j.Verdict()
	for _, r := range Resources {
		m(dBottleneck, b2f(v != nil && v.Resource == r || v == nil && r == Idle), r)
	}
	m(dMoreStreams, b2f(v != nil && v.MoreStreamsHelp))
	m(dBwLimit, float64(j.Limit.Rate()))
	j.collectAuto(m)
	j.collectOutcome(m)
}

// receiverCPU is the CPU time of each receiving process by its name: the
// streams one process serves report the same figure, counted once. A
// stream whose receiver did not name itself is a process of its own,
// named after the stream. A receiver in this process (a local copy)
// reports none: its CPU is the process's own.
func (j *Job) receiverCPU() map[string]int64 {
	cpu := map[string]int64{}
	for i, c := range j.StreamsInUse() {
		n := c.RecvCPUNanos.Load()
		name := "stream " + strconv.Itoa(i)
		if p := c.RecvProcess.Load(); p != nil && *p != "" {
			name = *p
		} else if n == 0 {
			continue
		}
		cpu[name] = max(cpu[name], n) // the latest figure: a gauge that only grows
	}
	return cpu
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Registry returns a registry with the job's metrics, build information
// and the standard Go and process collectors: what --metrics-addr serves.
// With Shard set, the job's series and bulkmove_build_info carry a shard
// label.
func (j *Job) Registry(version string) *prometheus.Registry {
	return newRegistry(version, j.labels(), true, j)
}

// FileRegistry is Registry without the Go and process collectors: what
// the textfile and the Pushgateway get. node_exporter exports its own
// go_* and process_* families, and refuses a textfile that repeats them
// (duplicate metrics); a Pushgateway keeps them after the process is gone,
// where they only mislead.
func (j *Job) FileRegistry(version string) *prometheus.Registry {
	return newRegistry(version, j.labels(), false, j)
}

func (j *Job) labels() prometheus.Labels {
	if j.Shard == "" {
		return nil
	}
	return prometheus.Labels{"shard": j.Shard}
}

// newRegistry is a registry with ours (each labelled with labels), build
// information and, with runtime, the standard Go and process collectors.
func newRegistry(version string, labels prometheus.Labels, runtime bool, ours ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	if runtime {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	wrapped := prometheus.WrapRegistererWith(labels, reg)
	wrapped.MustRegister(ours...)
	wrapped.MustRegister(buildInfo(version))
	return reg
}

// Route is a handler Serve offers beside /metrics.
type Route struct {
	Pattern string // as http.ServeMux reads it, e.g. "/bwlimit"
	Handler http.Handler
}

// Serve exports reg at /metrics, and the routes given, until ctx ends, on
// ListenAddr(addr) ("host:port"; no host: loopback; port 0 picks one),
// and returns the address it listens on. Serve guards nothing itself: a
// route that changes something wraps its handler in GuardWrites.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, routes ...Route) (net.Addr, error) {
	listen, _ := ListenAddr(addr)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	return ln.Addr(), nil
}

// TextfileMode is the mode of a new --metrics-textfile: readable by all,
// because node_exporter, which reads it, runs as a user of its own; the
// metrics name no files, only counts, rates and the host.
const TextfileMode = 0o644

// WriteTextfile writes reg for node_exporter's textfile collector,
// atomically (a temporary file beside path, renamed over it). A new file
// is TextfileMode; one that exists keeps its mode, so a file an operator
// made narrower (0640 for node_exporter's group) is not widened.
func WriteTextfile(path string, reg *prometheus.Registry) error {
	mode := os.FileMode(TextfileMode)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	mfs, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	// A name node_exporter skips (it reads *.prom only), made 0600 by
	// CreateTemp until it is complete.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a failure; gone by then otherwise
	w := bufio.NewWriter(tmp)
	for _, mf := range mfs {
		if _, err = expfmt.MetricFamilyToText(w, mf); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	return nil
}

// Push sends reg to a Pushgateway under job, grouped by the given labels.
//
// After a success (kept false) the group is replaced whole (PUT), the last
// success time with it. After a failure (kept true) the group's families
// are replaced one by one (POST) except bulkmove_job_last_success_
// timestamp_seconds, which is left out of the push: the Pushgateway keeps
// the one the group's last successful run pushed.
func Push(url, job string, grouping map[string]string, reg *prometheus.Registry, kept bool) error {
	if url == "" {
		return errors.New("no pushgateway URL")
	}
	var g prometheus.Gatherer = reg
	if kept {
		g = without{reg, dLastSuccess.name}
	}
	p := push.New(url, job).Gatherer(g)
	for k, v := range grouping {
		p = p.Grouping(k, v)
	}
	if kept {
		return p.Add()
	}
	return p.Push()
}

// without gathers all but the family named name.
type without struct {
	prometheus.Gatherer
	name string
}

func (w without) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := w.Gatherer.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if mf.GetName() != w.name {
			out = append(out, mf)
		}
	}
	return out, err
}
