// Package sqlitememory implements memory.Provider on an SQLite file.
package sqlitememory
