package send

// Every file body over a TCP stream without hashes goes by sendfile in
// this package's tests, whatever its size: the conformance matrix's
// "tcp-sendfile" transport then runs that path on every test tree.
func init() { sendfileMin = 1 }
