package indexwatch

// Messages is how many versions the watcher received, heartbeats included.
func (w *Watcher) Messages() int64 { return w.messages.Load() }
