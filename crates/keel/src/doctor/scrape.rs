//! Prometheus text read into samples, and what changed between two scrapes an interval apart:
//! a counter's increase, a histogram's quantile over the interval (as PromQL's
//! `histogram_quantile` over `increase`), a gauge's latest value.

use std::collections::BTreeMap;

/// One sample: its labels, sorted by name, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `(name, value)` pairs.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if it has one.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of one scrape, by metric name (`_bucket`, `_sum`, `_count` kept as written).
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    metrics: BTreeMap<String, Vec<Sample>>,
    /// Why the server gave no metrics, if it did not answer.
    pub unanswered: Option<String>,
}

impl Scrape {
    /// Reads Prometheus or OpenMetrics text; lines it cannot read are skipped.
    pub fn parse(text: &str) -> Scrape {
        let mut metrics: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if let Some((name, sample)) = parse_line(line) {
                metrics.entry(name).or_default().push(sample);
            }
        }
        Scrape {
            metrics,
            unanswered: None,
        }
    }

    /// The scrape of a server that did not answer, and why.
    pub fn unanswered(why: String) -> Scrape {
        Scrape {
            metrics: BTreeMap::new(),
            unanswered: Some(why),
        }
    }

    /// The samples of `name` whose labels `keep` accepts.
    pub fn samples<'s>(
        &'s self,
        name: &str,
        keep: impl Fn(&Sample) -> bool + 's,
    ) -> impl Iterator<Item = &'s Sample> + 's {
        self.metrics
            .get(name)
            .into_iter()
            .flatten()
            .filter(move |s| keep(s))
    }

    /// The sum of the samples of `name` that `keep` accepts (None without any sample).
    pub fn sum(&self, name: &str, keep: impl Fn(&Sample) -> bool) -> Option<f64> {
        let mut found = None;
        for s in self.samples(name, keep) {
            *found.get_or_insert(0.0) += s.value;
        }
        found
    }
}

/// What changed between two scrapes of one server.
#[derive(Debug, Clone)]
pub struct Delta<'s> {
    /// The first scrape.
    pub before: &'s Scrape,
    /// The second.
    pub after: &'s Scrape,
}

/// Below this many observations in an interval, a p99 is their maximum (one outlier):
/// [`Delta::p99`] reads their median instead.
pub const FEW_OBSERVATIONS: f64 = 20.0;

impl Delta<'_> {
    /// Whether both scrapes answered: without either, no counter or histogram can be compared
    /// (a lifetime total is not an interval's).
    pub fn comparable(&self) -> bool {
        self.before.unanswered.is_none() && self.after.unanswered.is_none()
    }

    /// Whether the server restarted between the scrapes (its `process_start_time_seconds`
    /// moved): its counters started again from zero.
    pub fn restarted(&self) -> bool {
        let start = |s: &Scrape| s.sum("process_start_time_seconds", all);
        matches!((start(self.before), start(self.after)), (Some(b), Some(a)) if a != b)
    }

    /// The scrape counters are compared with: the first, or nothing after a restart.
    fn base(&self) -> Option<&Scrape> {
        (!self.restarted()).then_some(self.before)
    }

    /// How much the counter `name` (its samples `keep` accepts) grew; a counter that restarted
    /// counts from zero; 0 unless both scrapes answered.
    pub fn increase(&self, name: &str, keep: impl Fn(&Sample) -> bool + Copy) -> f64 {
        if !self.comparable() {
            return 0.0;
        }
        let after = self.after.sum(name, keep).unwrap_or(0.0);
        let before = self.base().and_then(|b| b.sum(name, keep)).unwrap_or(0.0);
        if after >= before {
            after - before
        } else {
            after
        }
    }

    /// The p99 of histogram `name` over the interval, and the quantile read (`p99`, or `p50`
    /// when fewer than [`FEW_OBSERVATIONS`] were observed).
    pub fn p99(
        &self,
        name: &str,
        keep: impl Fn(&Sample) -> bool + Copy,
    ) -> Option<(f64, &'static str)> {
        let inf = |s: &Sample| s.label("le") == Some("+Inf") && keep(s);
        let observed = self.increase(&format!("{name}_bucket"), inf);
        if observed < FEW_OBSERVATIONS {
            Some((self.quantile(name, 0.5, keep)?, "p50"))
        } else {
            Some((self.quantile(name, 0.99, keep)?, "p99"))
        }
    }

    /// The `q` quantile of histogram `name` over the interval (its samples `keep` accepts),
    /// interpolated within the bucket as PromQL does; None when nothing was observed or the
    /// scrapes cannot be compared.
    pub fn quantile(
        &self,
        name: &str,
        q: f64,
        keep: impl Fn(&Sample) -> bool + Copy,
    ) -> Option<f64> {
        let buckets = |scrape: &Scrape| -> BTreeMap<u64, f64> {
            let mut by_le = BTreeMap::new();
            for s in scrape.samples(&format!("{name}_bucket"), keep) {
                let le = match s.label("le") {
                    Some("+Inf") => f64::INFINITY,
                    Some(le) => match le.parse::<f64>() {
                        Ok(le) => le,
                        Err(_) => continue,
                    },
                    None => continue,
                };
                *by_le.entry(le.to_bits()).or_insert(0.0) += s.value;
            }
            by_le
        };
        if !self.comparable() {
            return None;
        }
        let before = self.base().map(&buckets).unwrap_or_default();
        let after = buckets(self.after);
        let mut counts: Vec<(f64, f64)> = after
            .iter()
            .map(|(&le, &n)| {
                (
                    f64::from_bits(le),
                    n - before.get(&le).copied().unwrap_or(0.0),
                )
            })
            .collect();
        counts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = counts.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(le, n) in &counts {
            if n >= rank {
                if le.is_infinite() {
                    // Past the last bound: the last bound, as PromQL answers.
                    return Some(lower.0);
                }
                let within = if n > lower.1 {
                    (rank - lower.1) / (n - lower.1)
                } else {
                    1.0
                };
                return Some(lower.0 + (le - lower.0) * within);
            }
            lower = (le, n);
        }
        Some(lower.0)
    }

    /// The latest value of gauge `name` (the sum of its samples `keep` accepts).
    pub fn gauge(&self, name: &str, keep: impl Fn(&Sample) -> bool) -> Option<f64> {
        self.after.sum(name, keep)
    }
}

/// Every sample.
pub fn all(_: &Sample) -> bool {
    true
}

fn parse_line(line: &str) -> Option<(String, Sample)> {
    let (name, rest) = match line.find('{') {
        Some(open) => (&line[..open], &line[open..]),
        None => {
            let (name, rest) = line.split_once(' ')?;
            (name, rest)
        }
    };
    let (labels, rest) = if let Some(body) = rest.strip_prefix('{') {
        let close = closing_brace(body)?;
        (parse_labels(&body[..close])?, &body[close + 1..])
    } else {
        (Vec::new(), rest)
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name.trim().to_string(), Sample { labels, value }))
}

/// Where the label set closes (a `}` outside quotes).
fn closing_brace(body: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn parse_labels(body: &str) -> Option<Vec<(String, String)>> {
    let mut labels = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let after = after.trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((
            name.trim().trim_start_matches(',').trim().to_string(),
            value,
        ));
        rest = after[end + 1..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
    }
    labels.sort();
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP x_seconds a histogram
# TYPE x_seconds histogram
x_seconds_bucket{le="0.001"} 10
x_seconds_bucket{le="0.01"} 10
x_seconds_bucket{le="0.1"} 10
x_seconds_bucket{le="+Inf"} 10
x_seconds_sum 0.005
x_seconds_count 10
requests_total{code="200",verb="GET"} 5
requests_total{code="429",verb="GET"} 1
has_leader 1
odd{path="a\"}b",x="1"} 3
"#;
    const AFTER: &str = r#"x_seconds_bucket{le="0.001"} 10
x_seconds_bucket{le="0.01"} 10
x_seconds_bucket{le="0.1"} 110
x_seconds_bucket{le="+Inf"} 110
x_seconds_sum 5.0
x_seconds_count 110
requests_total{code="200",verb="GET"} 105
requests_total{code="429",verb="GET"} 11
has_leader 0
"#;

    #[test]
    fn counters_histograms_and_gauges_over_an_interval() {
        let (before, after) = (Scrape::parse(BEFORE), Scrape::parse(AFTER));
        let delta = Delta {
            before: &before,
            after: &after,
        };
        assert_eq!(delta.increase("requests_total", all), 110.0);
        assert_eq!(
            delta.increase("requests_total", |s| s.label("code") == Some("429")),
            10.0
        );
        // All 100 new observations fell in (0.01, 0.1]: the p99 is near its top.
        let p99 = delta.quantile("x_seconds", 0.99, all).unwrap();
        assert!((p99 - 0.0991).abs() < 1e-9, "{p99}");
        assert_eq!(delta.gauge("has_leader", all), Some(0.0));
        assert_eq!(delta.quantile("missing", 0.99, all), None);
        // Quoted braces and escaped quotes in label values.
        let odd: Vec<_> = before.samples("odd", all).collect();
        assert_eq!(odd[0].label("path"), Some("a\"}b"));
        assert_eq!(odd[0].value, 3.0);
    }

    #[test]
    fn a_restarted_counter_counts_from_zero() {
        let (before, after) = (Scrape::parse("c_total 100\n"), Scrape::parse("c_total 7\n"));
        let delta = Delta {
            before: &before,
            after: &after,
        };
        assert_eq!(delta.increase("c_total", all), 7.0);
    }
}
