//! [`AbortOnDrop`]: a task that ends when the one who waits for it goes.

/// Aborts a task when dropped (a client gone ends the work done for it).
pub struct AbortOnDrop(pub tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
