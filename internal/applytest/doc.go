// Package applytest checks a storage.BatchApplyFunc against its kind's
// storage.ApplyFunc in tests: both applied to the same records in fresh
// bbolt files must leave the same buckets.
package applytest
