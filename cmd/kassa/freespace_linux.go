package main

import "syscall"

// freeSpace is the room left to an unprivileged writer on the disk of dir.
func freeSpace(dir string) (int64, bool) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, false
	}
	return int64(fs.Bavail) * fs.Bsize, true
}
