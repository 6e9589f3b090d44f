package groups

// Parked reports whether the ticker sleeps, nothing in the core timing
// out (for the ticker's test).
func (c *Coordinator) Parked() bool { return c.parked.Load() }
