# Maximum subarray sum (Kadane), read from stdin: n, then n integers. A demo for worldline trace-script.
def solve(nums):
    best = cur = nums[0]
    for x in nums[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return best


def main():
    n = int(input())
    nums = list(map(int, input().split()))
    assert len(nums) == n
    print(solve(nums))


main()
