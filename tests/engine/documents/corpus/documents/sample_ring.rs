//! A fixed-capacity ring buffer for sensor samples.
//!
//! The field logger on each allotment node samples its soil probe every fifteen minutes and
//! uploads in bursts when the radio link is good. Between uploads the samples wait here. The
//! buffer never allocates after construction: the node has 64 KiB of RAM and a heap that
//! fragments is a node that reboots at three in the morning.
//!
//! When the buffer is full, the **oldest** sample is overwritten. For a logger, recent data is
//! worth more than old data, and blocking the sampler is never an option. Each overwrite is
//! counted so the uploader can report how many samples were lost.

use core::fmt;

/// One reading from a soil probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since the Unix epoch, from the node's real-time clock.
    pub timestamp: u32,
    /// Raw 10-bit ADC count from the capacitive probe (0..=1023).
    pub raw: u16,
    /// Soil temperature in hundredths of a degree Celsius, so 1875 means 18.75 °C.
    pub temp_centi_c: i16,
}

/// Why a ring buffer could not be built.
#[derive(Debug, PartialEq, Eq)]
pub enum RingError {
    /// A capacity of zero would make every push an overwrite of nothing.
    ZeroCapacity,
    /// The capacity is larger than the static storage compiled into the firmware.
    TooLarge { requested: usize, max: usize },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::ZeroCapacity => write!(f, "ring buffer capacity must be at least 1"),
            RingError::TooLarge { requested, max } => {
                write!(f, "ring buffer capacity {requested} exceeds the maximum of {max}")
            }
        }
    }
}

/// The most samples any buffer may hold: four days at one sample every fifteen minutes.
pub const MAX_CAPACITY: usize = 384;

/// A ring buffer of [`Sample`]s with overwrite-oldest semantics.
pub struct SampleRing {
    slots: [Sample; MAX_CAPACITY],
    capacity: usize,
    /// Index of the oldest sample.
    head: usize,
    /// Number of samples currently stored.
    len: usize,
    /// Samples overwritten before they were read, since the last call to `take_overwritten`.
    overwritten: u32,
}

impl SampleRing {
    /// A new empty ring that holds at most `capacity` samples.
    ///
    /// Fails with [`RingError::ZeroCapacity`] or [`RingError::TooLarge`] rather than panicking:
    /// the capacity comes from the node's configuration page, which a user can get wrong.
    pub fn with_capacity(capacity: usize) -> Result<Self, RingError> {
        if capacity == 0 {
            return Err(RingError::ZeroCapacity);
        }
        if capacity > MAX_CAPACITY {
            return Err(RingError::TooLarge { requested: capacity, max: MAX_CAPACITY });
        }
        let empty = Sample { timestamp: 0, raw: 0, temp_centi_c: 0 };
        Ok(Self { slots: [empty; MAX_CAPACITY], capacity, head: 0, len: 0, overwritten: 0 })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    /// Adds a sample, overwriting the oldest one when the ring is full.
    ///
    /// Returns the overwritten sample, if any, so a caller that cares can log it.
    pub fn push(&mut self, sample: Sample) -> Option<Sample> {
        let tail = (self.head + self.len) % self.capacity;
        if self.is_full() {
            let lost = self.slots[self.head];
            self.slots[self.head] = sample;
            self.head = (self.head + 1) % self.capacity;
            self.overwritten = self.overwritten.saturating_add(1);
            Some(lost)
        } else {
            self.slots[tail] = sample;
            self.len += 1;
            None
        }
    }

    /// Removes and returns the oldest sample.
    pub fn pop(&mut self) -> Option<Sample> {
        if self.is_empty() {
            return None;
        }
        let sample = self.slots[self.head];
        self.head = (self.head + 1) % self.capacity;
        self.len -= 1;
        Some(sample)
    }

    /// The oldest sample without removing it; the uploader peeks, sends, and pops only when the
    /// gateway acknowledges, so a dropped radio packet loses nothing.
    pub fn peek(&self) -> Option<&Sample> {
        if self.is_empty() { None } else { Some(&self.slots[self.head]) }
    }

    /// Iterates from the oldest sample to the newest.
    pub fn iter(&self) -> impl Iterator<Item = &Sample> + '_ {
        (0..self.len).map(move |i| &self.slots[(self.head + i) % self.capacity])
    }

    /// How many samples were overwritten since the last call, and resets the count.
    pub fn take_overwritten(&mut self) -> u32 {
        core::mem::take(&mut self.overwritten)
    }

    /// Mean of the newest `n` raw readings, for the node's local watering decision.
    ///
    /// Returns `None` when fewer than `n` samples are stored, because an average of two
    /// readings after a reboot would open the valve on noise.
    pub fn moving_average(&self, n: usize) -> Option<f32> {
        if n == 0 || n > self.len {
            return None;
        }
        let skip = self.len - n;
        let sum: u32 = self.iter().skip(skip).map(|s| u32::from(s.raw)).sum();
        Some(sum as f32 / n as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: u32, raw: u16) -> Sample {
        Sample { timestamp: t, raw, temp_centi_c: 1500 }
    }

    #[test]
    fn zero_capacity_is_refused() {
        assert_eq!(SampleRing::with_capacity(0).err(), Some(RingError::ZeroCapacity));
    }

    #[test]
    fn oversized_capacity_is_refused() {
        let err = SampleRing::with_capacity(MAX_CAPACITY + 1).err().unwrap();
        assert_eq!(err.to_string(), "ring buffer capacity 385 exceeds the maximum of 384");
    }

    #[test]
    fn full_ring_overwrites_the_oldest_and_counts_it() {
        let mut ring = SampleRing::with_capacity(3).unwrap();
        for t in 0..3 {
            assert_eq!(ring.push(s(t, 100)), None);
        }
        assert_eq!(ring.push(s(3, 200)), Some(s(0, 100)));
        assert_eq!(ring.iter().map(|x| x.timestamp).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(ring.take_overwritten(), 1);
        assert_eq!(ring.take_overwritten(), 0);
    }

    #[test]
    fn moving_average_needs_enough_samples() {
        let mut ring = SampleRing::with_capacity(8).unwrap();
        ring.push(s(0, 400));
        assert_eq!(ring.moving_average(2), None);
        ring.push(s(1, 600));
        assert_eq!(ring.moving_average(2), Some(500.0));
    }

    #[test]
    fn peek_does_not_remove() {
        let mut ring = SampleRing::with_capacity(2).unwrap();
        ring.push(s(7, 1));
        assert_eq!(ring.peek().map(|x| x.timestamp), Some(7));
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.pop().map(|x| x.timestamp), Some(7));
        assert!(ring.is_empty());
    }
}
