package dataplane

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tlsPair is a TLS connection over loopback TCP: the client's end as
// Dial makes it (coalesced or plain tls.Client) and the server's as admit
// does.
func tlsPair(t testing.TB, coalesce bool) (client, server net.Conn, crc *recordConn) {
	t.Helper()
	cert, _, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- nil
			return
		}
		scfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
		if coalesce {
			srv <- tlsServer(c, scfg)
		} else {
			srv <- tls.Server(c, scfg)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ccfg := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	if coalesce {
		s := tlsClient(c, ccfg)
		client, crc = s, s.rc
	} else {
		client = tls.Client(c, ccfg)
	}
	server = <-srv
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, crc
}

// TestTLSRecordsWrittenTogether: a sender's 256 KiB flush over TLS is
// sealed into 16 KiB records, and they leave in one write, not one a
// record; what arrives is what was sent.
func TestTLSRecordsWrittenTogether(t *testing.T) {
	client, server, rc := tlsPair(t, true)
	const flush, flushes = 256 << 10, 16
	want := make([]byte, flush*flushes)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(bufio.NewReaderSize(server, 256<<10))
		got <- b
	}()
	// Through the handshake first: its writes are its own.
	if _, err := client.Write(want[:1]); err != nil {
		t.Fatal(err)
	}
	before := rc.writeCalls()
	for i := range flushes {
		p := want[i*flush : (i+1)*flush]
		if i == 0 {
			p = p[1:]
		}
		if _, err := client.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := rc.writeCalls() - before; n != flushes {
		t.Errorf("%d MiB in %d KiB writes over TLS took %d write calls, want %d (one a write, not one a 16 KiB record)", len(want)>>20, flush>>10, n, flushes)
	}
	client.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("received %d bytes, not the %d sent", len(b), len(want))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the receiver did not finish")
	}
}

// BenchmarkTLSStream measures the CPU of both ends of a TLS stream
// carrying 256 KiB writes, with records written together and large reads
// (coalesced) or crypto/tls's own record-at-a-time writes.
func BenchmarkTLSStream(b *testing.B) {
	for _, coalesce := range []bool{false, true} {
		name := "plain"
		if coalesce {
			name = "coalesced"
		}
		b.Run(name, func(b *testing.B) {
			client, server, _ := tlsPair(b, coalesce)
			buf := make([]byte, 256<<10)
			done := make(chan struct{})
			go func() {
				io.Copy(io.Discard, bufio.NewReaderSize(server, 256<<10))
				close(done)
			}()
			client.Write(buf[:1])
			var r0, r1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			client.Close()
			<-done
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(int64(b.N)*int64(len(buf))>>20), "cpu-ns/MiB")
		})
	}
}
