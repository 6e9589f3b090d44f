//go:build race

package workload

// raceEnabled: this binary is built with -race, so Sarama runs sarama in
// a child process built without it (see saramachild.go).
const raceEnabled = true
