internal import SiteKeepCrypto
print("bench")
