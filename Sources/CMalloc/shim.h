// glibc's allocator controls (mallopt, malloc_trim), which Glibc's Swift
// module leaves out: the service gives memory back after large inputs.
#include <malloc.h>
