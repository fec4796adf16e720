//go:build !linux

// Command floor measures Linux's system calls: it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "floor: measures Linux's system calls; run it on Linux")
	os.Exit(1)
}
