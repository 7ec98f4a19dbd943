// Package rss tunes and models receive-side scaling (RSS).
package rss
