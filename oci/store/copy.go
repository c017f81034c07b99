package store

import (
	"hash"
	"io"
	"os"
	"sync"
)

// Sizes of the download pipeline.
const (
	chunkSize     = 1 << 20 // bytes read from the network at a time
	chunksInHash  = 8       // chunks queued for the hasher
	writeBackSize = 1 << 20 // bytes written before write-back is started
)

var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// copyHashed copies src to the end of f and feeds the same bytes to h, in a
// pipeline: the hash runs on another core while the next chunk is read and
// written, and the kernel is asked to start writing each megabyte to disk
// as soon as it is in the page cache (sync_file_range), so that the fsync
// at the end of a download waits for the last megabyte or so, not for all
// of them: a blob of a few megabytes, smaller than a coarser step, would
// otherwise be written out by its fsync alone. Memory stays bounded: at most chunksInHash+2 chunks are in flight.
// written hears the bytes copied so far after each chunk is written.
func copyHashed(f *os.File, h hash.Hash, src io.Reader, written func(n int64)) (int64, error) {
	queue := make(chan *[]byte, chunksInHash)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range queue {
			h.Write(*b)
			*b = (*b)[:cap(*b)]
			chunks.Put(b)
		}
	}()
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		close(queue)
		<-done
		return 0, err
	}
	var n int64
	flushed := start
	for {
		b := chunks.Get().(*[]byte)
		m, rerr := io.ReadFull(src, *b)
		if m > 0 {
			if _, werr := f.Write((*b)[:m]); werr != nil {
				chunks.Put(b)
				err = werr
				break
			}
			n += int64(m)
			written(n)
			*b = (*b)[:m]
			queue <- b
			if pos := start + n; pos-flushed >= writeBackSize {
				startWriteBack(f, flushed, pos-flushed)
				flushed = pos
			}
		} else {
			chunks.Put(b)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	close(queue)
	<-done
	return n, err
}
