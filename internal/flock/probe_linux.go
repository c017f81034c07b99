//go:build linux

package flock

import (
	"bufio"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procLocks lists the file locks of the system.
const procLocks = "/proc/locks"

// Probe reports whether a process holds an exclusive flock on the file
// at path, and which: it opens the file read-only (never creating it: a
// missing file is a lock not held), asks for a shared lock without
// waiting, which only an exclusive lock refuses, and lets it go at once.
// The holder is looked up in /proc/locks by the file's device and inode.
// Its errors are *os.PathError, Op "open" or "probe".
func Probe(path string) (Holder, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return Holder{}, nil
	}
	if err != nil {
		return Holder{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	for {
		err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err == nil {
		_ = unix.Flock(fd, unix.LOCK_UN)
		return Holder{}, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return Holder{}, &os.PathError{Op: "probe", Path: path, Err: err}
	}
	h := Holder{Held: true}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return h, nil
	}
	if f, err := os.Open(procLocks); err == nil {
		h.PID = holderPID(f, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
		_ = f.Close()
	}
	return h, nil
}

// holderPID reads /proc/locks (lines such as "1: FLOCK  ADVISORY
// WRITE 5552 fe:00:9979027 0 EOF") for the process holding an exclusive
// flock on the file of device major:minor and inode ino: the process that
// took the lock, which may have passed it on to a child before exiting.
// Waiters ("1: -> FLOCK …") hold nothing. A line on the same inode of
// another device is taken when it is the only one (a file system whose
// stat reports another device than its locks, as btrfs subvolumes do);
// 0 means none is known.
func holderPID(locks io.Reader, major, minor uint32, ino uint64) int {
	other, others := 0, 0
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		if i, err := strconv.ParseUint(id[2], 10, 64); err != nil || i != ino {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		mnr, err2 := strconv.ParseUint(id[1], 16, 32)
		if err1 == nil && err2 == nil && uint32(maj) == major && uint32(mnr) == minor {
			return pid
		}
		if pid != other {
			other, others = pid, others+1
		}
	}
	if others == 1 {
		return other
	}
	return 0
}
