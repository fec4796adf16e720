package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// TestAgentMetrics: `bulkmove agent --metrics-addr` exports what the
// receiver wrote, read while the connection is still open.
func TestAgentMetrics(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(src, 0o755)
	for _, n := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(src, n), []byte(strings.Repeat(n, 100)), 0o644)
	}
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan int)
	go func() {
		code := run([]string{"--agent", "--metrics-addr", "127.0.0.1:0", dst}, toAgentR, fromAgentW, errW)
		fromAgentW.Close()
		errW.Close()
		done <- code
	}()
	line, _ := bufio.NewReader(errR).ReadString('\n')
	go io.Copy(io.Discard, errR)
	addr := regexp.MustCompile(`http://\S+/metrics`).FindString(line)
	if addr == "" {
		t.Fatalf("no metrics address in %q", line)
	}
	ctx := context.Background()
	c, err := send.Dial(ctx, "agent", fromAgentR, toAgentW, toAgentW, engine.Version, wire.ReceiveOptions{Check: "quick"}, source.Source{Root: src})
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan *model.Batch, 1)
	var entries []model.Entry
	for _, n := range []string{"a", "b", "c"} {
		fi, _ := os.Stat(filepath.Join(src, n))
		entries = append(entries, model.Entry{Path: n, Kind: model.KindFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime().UnixNano()})
	}
	in <- &model.Batch{ID: 1, Entries: entries, Bytes: 300}
	close(in)
	if _, err := c.Run(ctx, in, func(send.Result) {}); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"bulkmove_destination_written_files_total 3", "bulkmove_destination_written_bytes_total 300", "bulkmove_build_info{"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if _, err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != exitOK {
		t.Errorf("agent exit %d", code)
	}
}
