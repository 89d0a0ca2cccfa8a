// Compilation unit that owns the precompiled header (see src/common/pch.h).
