package mcp

// Down is closed once the client has seen its current session end (the server's process exited, its stdio
// closed): a test that kills the server waits on it instead of on a sleep, so the next call is a call after the
// death, not one racing the client's reader.
func Down(c *Client) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cn.done
}
