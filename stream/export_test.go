package stream

// FirstBuffered is firstBuffered, for the tests of package stream_test.
const FirstBuffered = firstBuffered
