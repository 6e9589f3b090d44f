//go:build !race

package workload

// raceEnabled: this binary is built without -race, so Sarama runs sarama
// in this process.
const raceEnabled = false
