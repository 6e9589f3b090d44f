// Command txncoord runs a Kafka-wire-compatible transaction coordinator with
// an embedded partition leader, and its admin commands.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "txncoord: not implemented yet")
	os.Exit(1)
}
