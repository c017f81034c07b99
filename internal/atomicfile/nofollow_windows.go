package atomicfile

// oNoFollow is no flag on Windows: a temporary file is created with
// O_EXCL, which fails on any name already there, a link included.
const oNoFollow = 0
