// The keyring layer: see KeyringBackend.swift.
