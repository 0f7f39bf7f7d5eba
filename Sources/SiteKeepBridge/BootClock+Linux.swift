internal import CLinux

func sitekeepBoottimeNanos() -> Int64 { Int64(sitekeep_boottime_ns()) }
