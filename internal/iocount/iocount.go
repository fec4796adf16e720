// Package iocount counts the bytes that pass through an io.Reader or an
// io.Writer: Reader and Writer keep the count in a plain field, for one
// goroutine (a stream's own writes, a tar reader's position); SharedReader
// adds to an atomic counter that several readers share and another
// goroutine reads while they run (a job's total, sampled by a controller).
//
// Each is a small struct meant to be embedded by value or allocated once
// beside what it wraps: counting adds no allocation and, in Reader and
// Writer, no atomic operation to the path it sits on.
//
// It imports nothing of bulkmove.
package iocount

import (
	"io"
	"sync/atomic"
)

// Reader reads from R and counts in N the bytes read.
type Reader struct {
	R io.Reader
	N int64
}

func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	r.N += int64(n)
	return n, err
}

// Writer writes to W and counts in N the bytes written.
type Writer struct {
	W io.Writer
	N int64
}

func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.W.Write(p)
	w.N += int64(n)
	return n, err
}

// SharedReader reads from R and adds the bytes read to *N, which other
// goroutines may read (and other SharedReaders add to) at the same time.
type SharedReader struct {
	R io.Reader
	N *atomic.Int64
}

func (r *SharedReader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	r.N.Add(int64(n))
	return n, err
}
