// Package sqlitestore implements credentials.Store on an SQLite file.
package sqlitestore
