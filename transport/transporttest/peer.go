package transporttest

import (
	"bufio"
	"fmt"
	"io"

	"github.com/bulkmove/bulkmove/wire"
)

// OtherProtocol answers one stream as a receiver of the next protocol
// version would: it reads the sender's hello and answers with its own,
// naming that version, for a setup's refused handshake (the sender must
// then name both versions). It writes nothing anywhere.
func OtherProtocol(r io.Reader, w io.Writer) error {
	typ, _, err := wire.ReadFrame(bufio.NewReader(r))
	if err != nil {
		return fmt.Errorf("reading the hello: %w", err)
	}
	if typ != wire.Hello {
		return fmt.Errorf("first frame %q, want hello", typ)
	}
	bw := bufio.NewWriter(w)
	hello := wire.Handshake{Proto: wire.Proto + 1, Version: "transporttest-next"}
	if err := wire.WriteFrame(bw, wire.Hello, wire.EncodeJSON(hello)); err != nil {
		return err
	}
	return bw.Flush()
}
