//! Go 1.16's `sort.Sort`, the unstable sort etcd 3.5 uses to order range results.
//!
//! etcd sorts range results with `sort.Sort` (or `sort.Sort(sort.Reverse(..))` for DESCEND), which
//! is not stable: keys with equal versions, revisions or values come out in an order determined by
//! the algorithm. To return byte-identical responses we run the same algorithm (quicksort with
//! ninther pivots, heapsort fallback, gap-6 shell pass and insertion sort for short runs).

/// Sorts `data` in place exactly as Go 1.16's `sort.Sort` does with the given `less`.
pub fn go_sort<T>(data: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = data.len();
    let mut s = Sorter { data, less };
    s.quick_sort(0, n, max_depth(n));
}

fn max_depth(n: usize) -> usize {
    let mut depth = 0;
    let mut i = n;
    while i > 0 {
        depth += 1;
        i >>= 1;
    }
    depth * 2
}

struct Sorter<'a, T, F> {
    data: &'a mut [T],
    less: F,
}

impl<T, F: Fn(&T, &T) -> bool> Sorter<'_, T, F> {
    fn less(&self, i: usize, j: usize) -> bool {
        (self.less)(&self.data[i], &self.data[j])
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.data.swap(i, j);
    }

    fn insertion_sort(&mut self, a: usize, b: usize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.less(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    fn sift_down(&mut self, lo: usize, hi: usize, first: usize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.less(first + child, first + child + 1) {
                child += 1;
            }
            if !self.less(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    fn heap_sort(&mut self, a: usize, b: usize) {
        let first = a;
        let hi = b - a;
        let mut i = (hi as isize - 1) / 2;
        while i >= 0 {
            self.sift_down(i as usize, hi, first);
            i -= 1;
        }
        let mut i = hi as isize - 1;
        while i >= 0 {
            self.swap(first, first + i as usize);
            self.sift_down(0, i as usize, first);
            i -= 1;
        }
    }

    fn median_of_three(&mut self, m1: usize, m0: usize, m2: usize) {
        if self.less(m1, m0) {
            self.swap(m1, m0);
        }
        if self.less(m2, m1) {
            self.swap(m2, m1);
            if self.less(m1, m0) {
                self.swap(m1, m0);
            }
        }
    }

    fn do_pivot(&mut self, lo: usize, hi: usize) -> (usize, usize) {
        let m = (lo + hi) >> 1;
        if hi - lo > 40 {
            let s = (hi - lo) / 8;
            self.median_of_three(lo, lo + s, lo + 2 * s);
            self.median_of_three(m, m - s, m + s);
            self.median_of_three(hi - 1, hi - 1 - s, hi - 1 - 2 * s);
        }
        self.median_of_three(lo, m, hi - 1);

        let pivot = lo;
        let (mut a, mut c) = (lo + 1, hi - 1);
        while a < c && self.less(a, pivot) {
            a += 1;
        }
        let mut b = a;
        loop {
            while b < c && !self.less(pivot, b) {
                b += 1;
            }
            while b < c && self.less(pivot, c - 1) {
                c -= 1;
            }
            if b >= c {
                break;
            }
            self.swap(b, c - 1);
            b += 1;
            c -= 1;
        }
        let mut protect = hi - c < 5;
        if !protect && hi - c < (hi - lo) / 4 {
            let mut dups = 0;
            if !self.less(pivot, hi - 1) {
                self.swap(c, hi - 1);
                c += 1;
                dups += 1;
            }
            if !self.less(b - 1, pivot) {
                b -= 1;
                dups += 1;
            }
            if !self.less(m, pivot) {
                self.swap(m, b - 1);
                b -= 1;
                dups += 1;
            }
            protect = dups > 1;
        }
        if protect {
            loop {
                while a < b && !self.less(b - 1, pivot) {
                    b -= 1;
                }
                while a < b && self.less(a, pivot) {
                    a += 1;
                }
                if a >= b {
                    break;
                }
                self.swap(a, b - 1);
                a += 1;
                b -= 1;
            }
        }
        self.swap(pivot, b - 1);
        (b - 1, c)
    }

    fn quick_sort(&mut self, mut a: usize, mut b: usize, mut max_depth: usize) {
        while b - a > 12 {
            if max_depth == 0 {
                self.heap_sort(a, b);
                return;
            }
            max_depth -= 1;
            let (mlo, mhi) = self.do_pivot(a, b);
            if mlo - a < b - mhi {
                self.quick_sort(a, mlo, max_depth);
                a = mhi;
            } else {
                self.quick_sort(mhi, b, max_depth);
                b = mlo;
            }
        }
        if b - a > 1 {
            for i in a + 6..b {
                if self.less(i, i - 6) {
                    self.swap(i, i - 6);
                }
            }
            self.insertion_sort(a, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_a_sort() {
        let mut seed = 7u64;
        for n in [0usize, 1, 2, 5, 12, 13, 41, 100, 1000] {
            let mut v: Vec<u64> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 33) % 17
                })
                .collect();
            let mut expected = v.clone();
            expected.sort();
            go_sort(&mut v, |a, b| a < b);
            assert_eq!(v, expected);
        }
    }

    /// Go's sort is not stable: a short run with a smaller element six places later is reordered
    /// by the gap-6 pass, which a stable sort would not do to the equal elements.
    #[test]
    fn is_not_stable_in_gos_way() {
        // (sort key, identity)
        let mut v = vec![
            (1, 'a'),
            (1, 'b'),
            (1, 'c'),
            (1, 'd'),
            (1, 'e'),
            (1, 'f'),
            (0, 'g'),
        ];
        go_sort(&mut v, |x, y| x.0 < y.0);
        // Gap pass swaps 'a' and 'g', then insertion sort leaves the equal ones as they are.
        let ids: String = v.iter().map(|x| x.1).collect();
        assert_eq!(ids, "gbcdefa");
    }
}
