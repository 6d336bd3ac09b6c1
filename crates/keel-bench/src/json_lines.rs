//! The framing of a Kubernetes watch response: one JSON document a line, lines split across
//! the frames the server happens to send. [`LineBuffer`] keeps the unfinished tail of one
//! frame until the next completes it, and hands out every complete, non-blank line.

/// The unfinished line of a stream of JSON lines.
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
}

impl LineBuffer {
    /// Calls `each` with every line `data` completes (without its newline; blank lines are
    /// skipped) and keeps the rest for the next call. Stops at the first error `each` returns.
    /// Returns how many lines were handed out.
    pub fn feed<E>(
        &mut self,
        data: &[u8],
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut lines = 0;
        let mut rest = data;
        if !self.partial.is_empty() {
            let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                self.partial.extend_from_slice(rest);
                return Ok(0);
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            if !line.trim_ascii().is_empty() {
                lines += 1;
                each(&line)?;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let line = &rest[..end];
            rest = &rest[end + 1..];
            if !line.trim_ascii().is_empty() {
                lines += 1;
                each(line)?;
            }
        }
        self.partial.extend_from_slice(rest);
        Ok(lines)
    }

    /// Forgets the unfinished line (its stream ended).
    pub fn clear(&mut self) {
        self.partial.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_across_frames() {
        let mut buffer = LineBuffer::default();
        let mut seen = Vec::new();
        let mut feed = |buffer: &mut LineBuffer, data: &[u8]| {
            buffer
                .feed(data, |line| {
                    seen.push(String::from_utf8_lossy(line).into_owned());
                    Ok::<_, ()>(())
                })
                .unwrap()
        };
        assert_eq!(feed(&mut buffer, b"{\"a\""), 0);
        assert_eq!(feed(&mut buffer, b":1}\n\n{\"b\":2}\n{\"c"), 2);
        assert_eq!(feed(&mut buffer, b"\":3}\n"), 1);
        buffer.clear();
        assert_eq!(feed(&mut buffer, b"{\"d\":4}\n"), 1);
        assert_eq!(seen, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "{\"d\":4}"]);
        let stopped = buffer.feed(b"x\ny\n", |_| Err("stop"));
        assert_eq!(stopped, Err("stop"));
    }
}
